"""The GPU measurement kit: ``run_all.sh`` runs the benchmarks in parts, :mod:`.devinfo` describes
the device, :mod:`.preflight` checks what is installed and :mod:`.summarize` writes the report."""
