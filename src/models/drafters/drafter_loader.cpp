#include "models/drafters/drafter_loader.h"

#include "base/error.h"
#include "models/common/config_files.h"
#include "models/drafters/dflash2/dflash2_drafter.h"
#include "models/drafters/dspark/dspark_drafter.h"
#include "models/model_family.h"

namespace md {

LoadedDrafter load_speculative_drafter(const std::string& directory, const TargetView& target,
                                       int threads, program::ExecutorKind executor) {
  const ConfigFiles files = read_config_files(directory);
  const ModelFamily family = detect_model_family(files.config, files.config_path);
  switch (family) {
    case ModelFamily::kDFlash2:
      return {load_dflash2_drafter(directory, target, threads, executor),
              std::string(family_name(family))};
    case ModelFamily::kDSpark:
      return {load_dspark_drafter(directory, target, threads, executor),
              std::string(family_name(family))};
    default:
      fail("{}: a {} model, not a drafter (DFlash2 or DSpark)", files.config_path,
           family_name(family));
  }
}

}  // namespace md
