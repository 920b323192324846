"""Initial schema: agents, versions, runs, iterations, matches, rounds, episodes, ratings, members

Revision ID: 0001
Revises: 
"""

from alembic import op
import sqlalchemy as sa


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('agents',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('body', sa.String(length=16), nullable=False),
    sa.Column('arch', sa.String(length=16), nullable=False),
    sa.Column('strategy', sa.String(length=16), nullable=False),
    sa.Column('provenance', sa.String(length=16), nullable=False),
    sa.Column('origin', sa.JSON(), nullable=False),
    sa.Column('default_version', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_agents')),
    sa.UniqueConstraint('name', name=op.f('uq_agents_name'))
    )
    op.create_table('runs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('progress_done', sa.Integer(), nullable=False),
    sa.Column('progress_total', sa.Integer(), nullable=False),
    sa.Column('state', sa.JSON(), nullable=False),
    sa.Column('code_version', sa.String(length=32), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_runs'))
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_runs_kind'), ['kind'], unique=False)

    op.create_table('iterations',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('iteration', sa.Integer(), nullable=False),
    sa.Column('env_steps', sa.Integer(), nullable=False),
    sa.Column('wall_seconds', sa.Float(), nullable=False),
    sa.Column('metrics', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_iterations_run_id_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_iterations')),
    sa.UniqueConstraint('run_id', 'iteration', name=op.f('uq_iterations_run_id'))
    )
    with op.batch_alter_table('iterations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_iterations_run_id'), ['run_id'], unique=False)

    op.create_table('versions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('agent_id', sa.Integer(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('iteration', sa.Integer(), nullable=True),
    sa.Column('checkpoint_path', sa.String(length=1024), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('metrics', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['agent_id'], ['agents.id'], name=op.f('fk_versions_agent_id_agents'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_versions')),
    sa.UniqueConstraint('agent_id', 'version', name=op.f('uq_versions_agent_id'))
    )
    with op.batch_alter_table('versions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_versions_agent_id'), ['agent_id'], unique=False)

    op.create_table('matches',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=True),
    sa.Column('run_index', sa.Integer(), nullable=True),
    sa.Column('version_a_id', sa.Integer(), nullable=False),
    sa.Column('version_b_id', sa.Integer(), nullable=False),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=False),
    sa.Column('outcome', sa.String(length=8), nullable=False),
    sa.Column('rounds_won_a', sa.Integer(), nullable=False),
    sa.Column('rounds_won_b', sa.Integer(), nullable=False),
    sa.Column('rounds_drawn', sa.Integer(), nullable=False),
    sa.Column('code_version', sa.String(length=32), nullable=False),
    sa.Column('mujoco_version', sa.String(length=32), nullable=False),
    sa.Column('timing', sa.JSON(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('wall_seconds', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_matches_run_id_runs'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['version_a_id'], ['versions.id'], name=op.f('fk_matches_version_a_id_versions')),
    sa.ForeignKeyConstraint(['version_b_id'], ['versions.id'], name=op.f('fk_matches_version_b_id_versions')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_matches')),
    sa.UniqueConstraint('run_id', 'run_index', name=op.f('uq_matches_run_id'))
    )
    with op.batch_alter_table('matches', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_matches_run_id'), ['run_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_matches_version_a_id'), ['version_a_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_matches_version_b_id'), ['version_b_id'], unique=False)

    op.create_table('members',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('generation', sa.Integer(), nullable=False),
    sa.Column('slot', sa.Integer(), nullable=False),
    sa.Column('version_id', sa.Integer(), nullable=False),
    sa.Column('parent_slot', sa.Integer(), nullable=True),
    sa.Column('cloned_by_match', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_members_run_id_runs'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['version_id'], ['versions.id'], name=op.f('fk_members_version_id_versions')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_members')),
    sa.UniqueConstraint('run_id', 'generation', 'slot', name=op.f('uq_members_run_id'))
    )
    with op.batch_alter_table('members', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_members_run_id'), ['run_id'], unique=False)

    op.create_table('ratings',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('after_index', sa.Integer(), nullable=False),
    sa.Column('match_id', sa.Integer(), nullable=False),
    sa.Column('version_id', sa.Integer(), nullable=False),
    sa.Column('mu', sa.Float(), nullable=False),
    sa.Column('sigma', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['match_id'], ['matches.id'], name=op.f('fk_ratings_match_id_matches'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_ratings_run_id_runs'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['version_id'], ['versions.id'], name=op.f('fk_ratings_version_id_versions')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_ratings')),
    sa.UniqueConstraint('run_id', 'after_index', 'version_id', name=op.f('uq_ratings_run_id'))
    )
    with op.batch_alter_table('ratings', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ratings_run_id'), ['run_id'], unique=False)
        batch_op.create_index('ix_ratings_run_version', ['run_id', 'version_id'], unique=False)

    op.create_table('rounds',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('match_id', sa.Integer(), nullable=False),
    sa.Column('index', sa.Integer(), nullable=False),
    sa.Column('version_a', sa.Integer(), nullable=False),
    sa.Column('version_b', sa.Integer(), nullable=False),
    sa.Column('outcome', sa.String(length=8), nullable=False),
    sa.Column('wins_a', sa.Integer(), nullable=False),
    sa.Column('wins_b', sa.Integer(), nullable=False),
    sa.Column('draws', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['match_id'], ['matches.id'], name=op.f('fk_rounds_match_id_matches'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_rounds')),
    sa.UniqueConstraint('match_id', 'index', name=op.f('uq_rounds_match_id'))
    )
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_rounds_match_id'), ['match_id'], unique=False)

    op.create_table('episodes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('round_id', sa.Integer(), nullable=False),
    sa.Column('index', sa.Integer(), nullable=False),
    sa.Column('outcome', sa.String(length=8), nullable=False),
    sa.Column('reason', sa.String(length=16), nullable=False),
    sa.Column('length', sa.Integer(), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['round_id'], ['rounds.id'], name=op.f('fk_episodes_round_id_rounds'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_episodes')),
    sa.UniqueConstraint('round_id', 'index', name=op.f('uq_episodes_round_id'))
    )
    with op.batch_alter_table('episodes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_episodes_round_id'), ['round_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('episodes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_episodes_round_id'))

    op.drop_table('episodes')
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_rounds_match_id'))

    op.drop_table('rounds')
    with op.batch_alter_table('ratings', schema=None) as batch_op:
        batch_op.drop_index('ix_ratings_run_version')
        batch_op.drop_index(batch_op.f('ix_ratings_run_id'))

    op.drop_table('ratings')
    with op.batch_alter_table('members', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_members_run_id'))

    op.drop_table('members')
    with op.batch_alter_table('matches', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_matches_version_b_id'))
        batch_op.drop_index(batch_op.f('ix_matches_version_a_id'))
        batch_op.drop_index(batch_op.f('ix_matches_run_id'))

    op.drop_table('matches')
    with op.batch_alter_table('versions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_versions_agent_id'))

    op.drop_table('versions')
    with op.batch_alter_table('iterations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_iterations_run_id'))

    op.drop_table('iterations')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_runs_kind'))

    op.drop_table('runs')
    op.drop_table('agents')
