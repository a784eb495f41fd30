"""Reading Kubernetes with the user's kubeconfig; trainops never writes to a cluster (git does).

- `client`: `connect(kubeconfig=…, context=…)` → a `Cluster` (REST by apiVersion/kind through
  discovery: built-in kinds and CRDs alike); unreachable, TLS, 401 and 403 are one-line
  RemoteErrors (exit 6); a refused object is an `ObjectRefused`.
- `dryrun`: what `validate --render --kubeconfig` asks: server-side apply with dryRun=All and
  fieldValidation=Strict of everything rendered, refusals located in the manifest; the
  cluster topology checked against the nodes' labels.
- `jobs`: status, logs and cancel of a Kubernetes training run (cancel is a GitOps commit).
- `applier`: a stand-in for Argo CD until a GitOps controller runs (tests; said in its name).

Other rooms (Argo CD and Argo Rollouts reads) build on `client.Cluster`: `get`, `list`,
`resource`, `logs`.
"""
