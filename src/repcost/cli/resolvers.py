"""The OmegaConf resolvers live in repcost.config.resolvers; imported here for the CLI modules."""

from ..config.resolvers import MAX_JOB_DIR, _job_dir, _uid  # noqa: F401
