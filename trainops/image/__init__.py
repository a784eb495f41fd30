"""Image builds: standard Dockerfile templates, the docker builder (any Docker-API engine)
and the layer builder (no engine: the project's code appended as one reproducible layer
onto a base image already in a trainops registry).

`trainops.image.api` is the entry point (`render_image`, `build_image`); nothing here
prints, and heavy clients (docker) load only inside the builder that needs them.
"""
