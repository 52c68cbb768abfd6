"""Study helpers that know nothing of the main job or the worker loop: the storage, the study
metadata (creation, resumption checks, sampler choice) and the shared trial budget."""
