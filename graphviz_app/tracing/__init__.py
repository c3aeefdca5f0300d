"""The torch side: walk live autograd graphs into the plain model, record modules, replay backward.

Only this package (with the expression language's evaluator, the web worker and `gradcheck`)
imports torch. `torch_internals` is the one package that reads torch's private attributes.
Nothing is imported here, so `import graphviz_app.tracing.X` loads only what X needs.
"""
