"""The build's one step beyond pyproject.toml: the wheel carries the repository's
bundled case files (``cases/``) as package data, ``gradcheck/bundled_cases/``, so that
what reads them (``gradcheck bench``'s layer and op workloads, its verdicts) works where
gradcheck is installed without its repository. ``cases/`` stays the one copy: the README's
Quickstart runs ``gradcheck run cases/`` in a clone, and the package reads its own copy
only where the build made one (gradcheck.cli.bench.config.BUNDLED)."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

#: the repository's folder copied, and its place in the package
CASES, INTO = "cases", os.path.join("gradcheck", "bundled_cases")


class BuildWithCases(build_py):
    def run(self):
        super().run()
        # an editable install reads the checkout's cases/ itself (nothing to copy)
        if not getattr(self, "editable_mode", False):
            self.copy_tree(CASES, os.path.join(self.build_lib, INTO))


setup(cmdclass={"build_py": BuildWithCases})
