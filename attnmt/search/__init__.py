"""Search: turning a model's next-token distributions into translations.

One greedy loop (`greedy`) and one beam loop (`beam`) over the model's decoder step
(`options.StepModel`), steered by rules that combine (`rules`): a prefix to continue
(`prefix` parses it, `forcing` forces it) and phrases to contain (`phrases`). `decode` batches
many sentences and picks the loop; `graphed` is the beam and greedy rule in fixed shapes, for
CUDA graphs; `teacher` feeds given outputs through the same step; `hypotheses` holds what they
return. Import from the modules themselves: this package's own module imports nothing, so its
light parts (`prefix`) stay light.
"""
