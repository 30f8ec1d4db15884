# An environment is imported by its name.
terraform import trueforge_environment.python python
