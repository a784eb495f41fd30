"""The test harness: real services on free loopback ports, for the tests, the benchmarks and
the scripts.

Each module starts one kind of service as a real process and stops it: `services` (the OCI
registry, S3 through moto, podman, git, waiting on a condition), `kube_cluster` (the
simulated Kubernetes cluster: etcd, the API server, controllers, kwok) with `kube_addons`,
`kube_api`, `kube_bins`, `kube_config` and `kube_jobs`, `argo_cluster` (Argo CD and Argo
Rollouts) with `githttp`, `kserve_cluster`, `slurm_cluster`, `serving_metrics`,
`token_issuer`; `planted` holds the credentials tests hand trainops and `interrupting` the
Ctrl-C helper. A missing binary raises `MissingDependency` naming its install command.

Beside the services, what tests, benchmarks and scripts share: `cli` (running `trainops`
in-process or as a process), `projects` (examples/tiny-llm's manifest with an overlay, a
serving project with releases pushed, short-windowed SLOs), `argo_live` and `argo_push`
(tiny-llm served and trained through Argo on the simulated cluster), `finetune` (a
safetensors fine-tune series), `tcp_proxy` (a counting, cutting TCP proxy) and `hf_cache`
(the hub tests' model as huggingface_hub's cache). Nothing here imports `tests`.

It is not shipped in the wheel: an editable install (`pip install -e .`, as
scripts/run-tests.sh makes) puts the project's root on the path, and `import
trainops_testing` works from tests, bench/ and scripts/ alike. The pytest fixtures that use
it are in tests/conftest.py and each room's conftest.
"""
