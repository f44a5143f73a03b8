"""Population training (``population.*``, docs/population.md): K members of one config,
each its own seed (and its own values of ``population.vary``'s keys), trained in one run.

A member owns a block of every slot's rows (member-major: member k's envs are rows
``[k*E, (k+1)*E)`` of a worker's ``K*E``), its own network inside one module, its own
optimizer and its own random streams. The run is a wider run to the rest of fastrl: the
workers, rings, feeds and learner see ``K*E`` rows a worker and one policy; this package
reaches them through the protocols every cross-cutting feature uses
(docs/architecture.md, "Adding a feature"):

- :mod:`~fastrl.population.config`: its config section, and each member's config;
- :mod:`~fastrl.population.plan`: the wider run, and each member's seeds;
- :mod:`~fastrl.population.policy`: the members' networks in one module;
- :mod:`~fastrl.population.actor`: the workers' action choice for every member's rows;
- :mod:`~fastrl.population.update`: the learner's update of every member.
"""
