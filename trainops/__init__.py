"""trainops: declarative GitOps for large-model training and inference.

This module stays import-light: `trainops --help` must start fast, so nothing heavy
(pydantic models, boto3, docker, git) is imported here.
"""

__version__ = "0.1.0"

DOCS_URL = "https://trainops.dev/docs/"
"""The documentation site (mkdocs.yml's site_url; a test keeps them equal): help epilogs and
scaffolded files point into it."""
