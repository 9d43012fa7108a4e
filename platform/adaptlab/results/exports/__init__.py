"""What leaves or enters a store in other tools' formats: MTEB result files
(:mod:`~adaptlab.results.exports.mteb`), ranx runs and qrels
(:mod:`~adaptlab.results.exports.ranx_io`), MLflow and W&B runs
(:mod:`~adaptlab.results.exports.mlflow_log`, :mod:`~adaptlab.results.exports.wandb_log`, from
:mod:`~adaptlab.results.exports.tracker_runs`), and the all-or-none writing of an export's files
(:mod:`~adaptlab.results.exports.export_files`)."""
