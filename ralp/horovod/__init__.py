"""Horovod-based training: the ring-allreduce trainer, its launchers and the netns Gloo driver."""
