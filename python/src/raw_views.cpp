// SPDX-License-Identifier: Apache-2.0
// The views of mlakv._mlakv.raw's entry points (op_functions.cpp), mlakv.torch's
// ops' way in. A tensor travels as the tuple (data_ptr, dtype, shape, strides,
// device_index) that the op reads off the torch tensor (dtype: mlakv::DType's
// value; device_index -1 = CPU), not as a DLPack capsule: exporting one per
// tensor per call costs more than the call, and Dynamo cannot trace it. The
// fake implementations pass views of fake tensors whose data pointers are made up.
#include <nanobind/nanobind.h>

#include <string>

#include "mlakv/error.h"
#include "views.h"

namespace mlakv::python {
namespace {

std::int64_t int_item(PyObject* o) {
  const long long value = PyLong_AsLongLong(o);
  if (value == -1 && PyErr_Occurred()) throw nb::python_error();
  return value;
}

// The tuple's dims, at most kMaxDims of them.
int dims(PyObject* seq, std::int64_t* out) {
  if (!PyTuple_Check(seq)) throw nb::type_error("mlakv.raw: a view's shape and strides must be tuples");
  const Py_ssize_t n = PyTuple_GET_SIZE(seq);
  if (n > kMaxDims) {
    throw Error(ErrorCode::kShape, "mlakv: arrays of more than " + std::to_string(kMaxDims) +
                                       " dims are not accepted, got " + std::to_string(n));
  }
  for (Py_ssize_t d = 0; d < n; ++d) out[d] = int_item(PyTuple_GET_ITEM(seq, d));
  return static_cast<int>(n);
}

}  // namespace

TensorView raw_view(nb::handle handle) {
  PyObject* t = handle.ptr();
  if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5) {
    throw nb::type_error("mlakv.raw: a view is (data_ptr, dtype, shape, strides, device_index)");
  }
  TensorView view;
  const unsigned long long pointer = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, 0));
  if (pointer == static_cast<unsigned long long>(-1) && PyErr_Occurred()) throw nb::python_error();
  view.data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(pointer));
  const std::int64_t dtype = int_item(PyTuple_GET_ITEM(t, 1));
  view.dtype =
      dtype >= 0 && dtype <= static_cast<std::int64_t>(DType::kOther) ? static_cast<DType>(dtype) : DType::kOther;
  view.ndim = dims(PyTuple_GET_ITEM(t, 2), view.shape);
  if (dims(PyTuple_GET_ITEM(t, 3), view.strides) != view.ndim) {
    throw nb::value_error("mlakv.raw: a view's shape and strides differ in length");
  }
  const std::int64_t device = int_item(PyTuple_GET_ITEM(t, 4));
  view.device = device < 0 ? Device{DeviceType::kCpu, 0} : Device{DeviceType::kCuda, static_cast<int>(device)};
  return view;
}

}  // namespace mlakv::python
