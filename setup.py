"""The wheel's build, as pyproject.toml declares it, from an emptied build folder.

setuptools never removes what an earlier build left in build/lib, and packs all of it: a file
packed once (a failing case a run left in baselines/sim, since removed) would ship in every
later wheel and in every `specgate init`'s copy. So each build starts from an empty build/lib.
"""

import shutil

from setuptools import setup
from setuptools.command.build_py import build_py


class FreshBuildPy(build_py):
    def run(self) -> None:
        if not self.editable_mode:
            shutil.rmtree(self.build_lib, ignore_errors=True)
        super().run()


setup(cmdclass={"build_py": FreshBuildPy})
