"""Learning (no paper section of its own; Bismarck's minibatch SGD): losses, optimisers,
schedules and the engine-agnostic minibatch trainer."""
