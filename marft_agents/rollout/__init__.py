"""Playing episodes: the layered rollout over a round's graph, tree rollouts, TRL's rollout, evaluation."""
