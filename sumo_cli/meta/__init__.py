"""The meta-learner's public face: its settings, batches, adaptation, learner and execution-time
adapters, gathered from the modules that hold each stage (see :mod:`sumo_cli.meta.config`)."""

from sumo_cli.meta.config import LOCOMOTION_BUFFER_EPISODES, ROBOSUMO_BUFFER_EPISODES, MetaConfig, Params
from sumo_cli.meta.batch import TrajBatch, batch_from_rollout, episode_batch
from sumo_cli.meta.model import GaussianModel, alpha_metrics, as_model, expand_params, init_log_alpha
from sumo_cli.meta.adaptation import adapt, adapt_trace, inner_grad, linear_baseline, prepare_inner, seg_sum, segments, step_index
from sumo_cli.meta.learner import MetaLearner, adv_stats_of, center_adv_per_task, meta_loss, post_returns
from sumo_cli.meta.execution import ContinueAdapter, ExecutionAdapter, adapt_execution, execution_adapter
