"""Memory placement of running programs: moving their pages between NUMA nodes."""
