"""Learning: losses, optimisers, schedules and the engine-agnostic minibatch trainer."""
