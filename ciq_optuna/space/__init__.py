"""The space model: compiler controls, the compiler space files and their check, application
parameters, and the combined search space a trial samples from."""
