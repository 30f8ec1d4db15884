# A volume is imported by its name.
terraform import trueforge_volume.datasets datasets
