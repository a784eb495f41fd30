"""The test harness: real services on free loopback ports, for the tests, the benchmarks and
the scripts.

Each module starts one kind of service as a real process and stops it: `services` (the OCI
registry, S3 through moto, podman, git, waiting on a condition), `kube_cluster` (the
simulated Kubernetes cluster: etcd, the API server, controllers, kwok) with `kube_addons`,
`kube_api`, `kube_bins`, `kube_config` and `kube_jobs`, `argo_cluster` (Argo CD and Argo
Rollouts) with `githttp`, `kserve_cluster`, `slurm_cluster`, `serving_metrics`,
`token_issuer`; `planted` holds the credentials tests hand trainops and `interrupting` the
Ctrl-C helper. A missing binary raises `MissingDependency` naming its install command.

It is not shipped in the wheel: an editable install (`pip install -e .`, as
scripts/run-tests.sh makes) puts the project's root on the path, and `import
trainops_testing` works from tests, bench/ and scripts/ alike. The pytest fixtures that use
it are in tests/conftest.py and each room's conftest.
"""
