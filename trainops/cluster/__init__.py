"""Reading Kubernetes with the user's kubeconfig; trainops writes to a cluster through git only,
with one exception: cordoning and tainting a node that failed a run (`nodes`).

- `access`: `ClusterAccess`, the one value naming the cluster read (kubeconfig, context, how found).
- `client`: `connect(access)` → a `Cluster` (REST by apiVersion/kind through
  discovery: built-in kinds and CRDs alike); unreachable, TLS, 401 and 403 are one-line
  RemoteErrors (exit 6); a refused object is an `ObjectRefused`.
- `dryrun`: what `validate --render --kubeconfig` asks: server-side apply with dryRun=All and
  fieldValidation=Strict of everything rendered, refusals located in the manifest; the
  cluster topology checked against the nodes' labels.
- `nodes`: a Node's health (conditions, Warning events) and `cordon_node`, THE ONE WRITE
  OUTSIDE GIT (its docstring says why); `trainops train watch` (trainops.train.kubewatch)
  calls it on a hardware fault.
- `applier`: a stand-in for Argo CD until a GitOps controller runs (tests; said in its name).

Other rooms build on `client.Cluster`: the train room reads training jobs with it
(trainops.train.kube_jobs), Argo CD and Argo Rollouts reads (`argo`) too: `get`, `list`,
`resource`, `logs`.
"""
