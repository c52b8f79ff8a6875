"""A node split among the MPI ranks that run on it, and among their GPUs.

- :mod:`pinlab.ranks.context`: which local rank this process is, of how many, read from the
  launcher's environment (srun, Open MPI's mpirun, MPICH's Hydra, PMI, MVAPICH);
- :mod:`pinlab.ranks.gpus`: the node's GPUs and the CPUs and NUMA nodes each is local to, from
  hwloc's PCI and OS devices;
- :mod:`pinlab.ranks.split`: one domain of CPUs (and GPUs) per local rank.

``pinlab place --ranks R [--gpus]`` previews a whole node; ``pinlab run`` under a launcher places
each rank's threads inside its own domain.
"""
