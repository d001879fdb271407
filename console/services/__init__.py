"""The console's workflows, one module per area; views, the API, commands and tasks call them.

Each write is one transaction; errors a caller can act on are ``console.errors.ServiceError``s.
Below them: ``console.audit``, ``console.queries``, ``console.models``, ``console.errors``.
Within the package: ``validation`` and ``queue`` are the base; ``summarizer_factory`` builds the
configured summarizer; ``runs`` (queue, execute, recover), ``sessions`` (create, append: may queue
a run), ``reported`` (runs a runtime did in-process); ``drift`` (checks, cases, review) and
``summaries`` (re-summarize, promote: resolves drift cases); ``regression`` (export and replay of
drift cases), ``exports`` (a session with its whole record) and ``dashboard`` (the quality metrics).
Tasks are sent only by ``queue``, by name.
"""
