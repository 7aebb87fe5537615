"""Intel GPUs: zebins, their ``.ze_info`` and notes, the device table, the old patch-token format.

Modules: ``devices`` (the one device table), ``notes`` (``.note.intelgt.compat``), ``yamlsubset`` and
``zeinfo`` (``.ze_info``), ``zebin`` (the ELF's functions and call edges), ``importer`` (the unified
model), ``patchtoken`` (the old format, recognised), ``fatarchive`` (``ocloc``'s multi-device ``ar``),
``vendor`` (the descriptor).
"""
