"""The Spark jobs, one package each: `job.py` reads source → transform → sink; `config.py` holds
its settings. `pipeline.catalog` starts one by name."""
