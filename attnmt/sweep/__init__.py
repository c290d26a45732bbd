"""Sweeps: many trainings over configs in one Optuna study, shared by worker processes.

    spec    the sweep file: base config, overrides, grid and search experiments -> a Plan
    store   the study database (SQLite or any SQLAlchemy URL): claims, staleness, retries
    run     `attnmt sweep SWEEP.yaml`: workers that train and score the trials
    report  `attnmt sweep report`: tables and plots of a stored study

The `attnmt` command's parser for these lives in `attnmt.cli`, like every other command's.
"""
