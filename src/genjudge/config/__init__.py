"""The configuration of a run: loading the layers of config files, the schema's defaults and
validation (`validation`), the typed generator, judge and dataset specs (`specs`), the named
generators x datasets x judges of an experiment (`experiment`), the scheduler settings of its jobs
(`job_settings`) and the checks of a whole run before any job starts (`checks`). The loader and the checks are re-exported here.

May import: errors, models, cluster, data, judging.
"""

from genjudge.config.checks import DEMO_MODELS, builds_demo_model, check, is_demo_model, judge_template
from genjudge.config.validation import (
    DEMO,
    SCHEMA,
    WORKFLOW_DIR,
    coerce,
    defaults,
    import_plugins,
    layers,
    load,
    load_plugins,
    plugin_files,
    remove_nulls,
    schema,
    validate,
)

__all__ = [
    "DEMO",
    "DEMO_MODELS",
    "SCHEMA",
    "WORKFLOW_DIR",
    "builds_demo_model",
    "check",
    "coerce",
    "defaults",
    "is_demo_model",
    "judge_template",
    "layers",
    "load",
    "import_plugins",
    "load_plugins",
    "plugin_files",
    "remove_nulls",
    "schema",
    "validate",
]
