import {
  to = trueforge_volume.datasets
  identity = {
    name = "datasets"
  }
}
