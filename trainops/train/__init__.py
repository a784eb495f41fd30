"""The training room: every way a run trains, behind one interface.

- `target`: `Target` (render, submit, status, logs, cancel, watch) and its implementations
  (local, Slurm, Kubernetes: Volcano, Kueue, Kubeflow through one reader); `target_for`
  chooses a run's target once, from its record or the manifest.
- `submit`: the rendered tree on disk (`train render`) or committed to GitOps (`train submit`).
- `local`, `faulted`: `train run --local`: restore, train, push checkpoints, under fault
  supervision (restart here on a transient fault).
- `slurm_run`: `train run --slurm`, the job's supervisor on its batch host; `slurm_jobs`:
  sbatch (held, committed, released), status, logs, cancel of the job a run became.
- `kube_jobs`: the training job on the API server (state, pods, logs, waiting until done);
  `cancel`: a Kubernetes run cancelled by a GitOps commit; `kubewatch`, `exclude`: `train
  watch`, acting on node faults (requeue away from a node through git).

Below it: render (job objects as data), gitops, registry, checkpoint, faults (signals,
incidents, ETTR), slurm and cluster (talking to each scheduler). Above it: pipeline (the
train stage runs here) and cli.
"""
