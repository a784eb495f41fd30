"""The artifact registry: references, the OCI artifact format, lineage, and the Store API.

Artifacts are OCI image manifests (one file per layer, CNCF ModelPack media types) kept in
any of three interchangeable backends chosen by URL scheme: file:// (an OCI image layout
per repository), oci:// (the OCI Distribution API) and s3:// (the same objects in a bucket).
"""
