"""The pipeline: the stage graph, stage keys, caching, executors, `trainops run` and `trainops ci`.

graph.py      which stages a manifest defines, in what order; --from/--to windows
keys.py       stage keys: resolved config + input digests (source tree, environment)
cache.py      stage records in the registry (<registry>/<pipeline>/stages)
executors/    local (the embedded default) and cluster; eval/release/rollout adapters
run.py        run_pipeline: each stage cached, run, or planned (--dry-run)
ci.py         the pushed range, what it affects, run_ci; cireport.py: summary, JUnit
plan.py, context.py, local.py, submit.py   plan, run context, local training, GitOps submit
"""
