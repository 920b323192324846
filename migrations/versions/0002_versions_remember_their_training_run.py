"""versions remember their training run

Revision ID: 0002
Revises: 0001
"""

from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('versions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('run_id', sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f('ix_versions_run_id'), ['run_id'], unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_versions_run_id_runs'), 'runs', ['run_id'], ['id'], ondelete='SET NULL')



def downgrade() -> None:
    with op.batch_alter_table('versions', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_versions_run_id_runs'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_versions_run_id'))
        batch_op.drop_column('run_id')

