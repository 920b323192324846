"""The paper's players and settings of the game experiments (compete.experiment), which commands
offer as defaults: importable without the database, since a command's help is built before
anything heavy loads."""

from __future__ import annotations

#: The shipped learning opponents of Fig. 5 and 6: a self-play LSTM of each body with 110 consecutive
#: versions (one PPO update each), continued from the population's LSTM (policies/manifest.json).
LEARNING_OPPONENTS = ("learn-ant-lstm", "learn-bug-lstm", "learn-spider-lstm")
#: The calibration's agents (the paper's Table 4): the population's pre-trained LSTM of each body.
CALIBRATION_AGENTS = ("ant-lstm", "bug-lstm", "spider-lstm")
#: The paper's numbers of episodes per round in Fig. 6.
PAPER_EPISODES = (3, 10, 25, 50, 75, 90)
#: The rounds at the end of a game over which the paper reports win rates (Fig. 6: the last 25).
LAST_ROUNDS = 25
