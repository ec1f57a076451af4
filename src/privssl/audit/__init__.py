"""Privacy audits: empirical lower bounds on ε from an attack's decisions (hypothesis-test and
one-run bounds, at a stated confidence) and the canaries of the one-run audits. An audit reads
attack decisions; it never trains or releases anything itself."""
