# Resolve VECTORS (a directory of .vec files) for the sub-makes.
# Absolute as given; a relative path is taken from the directory make was
# started in ($(PWD) is the invoking shell's, unchanged by -C), else from the
# project root, else from the current directory. Default: the repository's
# own timing vectors (crates/rungs-core/tests/vectors). Needs ROOT (the
# project root) set first.
VECTORS ?= $(ROOT)/crates/rungs-core/tests/vectors
VECTORS_START := $(if $(PWD),$(PWD),$(ROOT))
VECTORS_DIR := $(strip $(if $(filter /%,$(VECTORS)),$(VECTORS),\
    $(firstword $(wildcard $(VECTORS_START)/$(VECTORS) $(ROOT)/$(VECTORS) $(CURDIR)/$(VECTORS)) \
    $(VECTORS_START)/$(VECTORS))))
