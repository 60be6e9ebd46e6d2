# SPDX-License-Identifier: Apache-2.0
"""Engine integrations: the seams inference engines bind mlakv through."""
