"""attnmt-prepare: build the processed dataset of the `data` config (a no-op when up to date)."""

import hydra
from omegaconf import DictConfig

from attnmt.cli.common import CONFIG_PATH, plain, user_errors
from attnmt.config import to_dataclass
from attnmt.data.config import DataConfig
from attnmt.data.prepare import prepare_dataset, summary_table


@hydra.main(config_path=CONFIG_PATH, config_name="prepare", version_base="1.3")
@user_errors
def main(cfg: DictConfig) -> None:
    data = to_dataclass(DataConfig, plain(cfg.data), "data")
    folder, manifest, built = prepare_dataset(data)
    print(summary_table(manifest))
    print(f"{'built' if built else 'up to date'}: {folder}")


if __name__ == "__main__":
    main()
