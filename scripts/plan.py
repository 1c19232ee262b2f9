"""Print the GPU check and memory plan (rule plan)."""

import sys

from genjudge.cli import main

sm = snakemake  # noqa: F821 - injected by Snakemake
args = ["plan", "--json", sm.output[0]]
for path in sm.params.configfiles:
    args += ["--configfile", str(path)]
sys.exit(main(args))
