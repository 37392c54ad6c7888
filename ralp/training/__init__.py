"""Training machinery every mode shares: what a model trains with (compile), its data, the
fit loop, validation, history and checkpoints. The modes' runtimes (``ralp.ps_strategy``,
``ralp.horovod``, ``ralp.collective``) sit above it."""
