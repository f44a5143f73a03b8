"""Where the processes of a run live, and the supervisor that keeps them alive.

:class:`~fastrl.runtime.supervisor.Supervisor` runs a job on one of three runtimes
(``infra.runtime``): ``local`` (learner and workers in their own processes), ``serial``
(everything in the calling process) or ``ray`` (workers as Ray actors).
"""
