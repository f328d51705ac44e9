"""What the model is told of a failure, above the policy models: ``repeat`` (rule R: may it be repeated),
``observations`` (the observation, its JSON Schema, the instructions) and ``suggestions`` (one sentence per type)."""
