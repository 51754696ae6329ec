# Where cargo builds: CARGO_TARGET_DIR when set, else target/ in the project
# root. Every make here runs cargo from the project root, so a relative
# CARGO_TARGET_DIR is taken from there, as cargo takes it. Needs ROOT (the
# project root) set first; defines TARGET_DIR.
TARGET_DIR := $(if $(CARGO_TARGET_DIR),$(if $(filter /%,$(CARGO_TARGET_DIR)),$(CARGO_TARGET_DIR),$(ROOT)/$(CARGO_TARGET_DIR)),$(ROOT)/target)
