"""Allreduce with TensorFlow's own collectives (MultiWorkerMirroredStrategy): no Horovod needed."""
