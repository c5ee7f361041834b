"""Fleet-scale PySpark jobs: thin shells that run the core (`hashing/`, `restore/`) in executors."""
