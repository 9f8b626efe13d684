"""lit configuration for smalti: FileCheck-style tests of the command-line tools."""

import os
import sys

import lit.formats

config.name = "smalti"
config.test_format = lit.formats.ShTest()
config.suffixes = [".mlir", ".ptx", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.test_source_root
config.excludes = ["Inputs", "lit.cfg.py"]

# The tools (smalti-opt, smalti-translate, smalti-sim) and filecheck live next to the Python
# that runs lit: the project's virtual environment.
tools_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([tools_dir, config.environment.get("PATH", "")])
for name in ("HOME", "TMPDIR", "SMALTI_DEBUG", "SMALTI_DUMP_TO", "PYTHONPATH"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
