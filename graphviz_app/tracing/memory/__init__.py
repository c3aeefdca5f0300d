"""The torch side of memory: measure a step as it runs, forecast it on `meta`, apply a checkpoint plan."""
