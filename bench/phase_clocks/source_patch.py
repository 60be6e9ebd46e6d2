"""One source file's exact-text replacements for a measurement build: each old text must occur as often as stated."""


class SourcePatch:
    def __init__(self, path):
        self.path = path
        with open(path) as f:
            self.text = f.read()

    def rep(self, old, new, count=1):
        found = self.text.count(old)
        assert found == count, (self.path, old[:80], found)
        self.text = self.text.replace(old, new)

    def write(self):
        with open(self.path, "w") as f:
            f.write(self.text)
